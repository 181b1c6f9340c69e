package api

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/workbench/tasks"
)

// ValidateSpec reads and validates a campaign spec exactly as agentpen up
// and POST /v1/campaigns do: campaign.DecodeSpec (malformed JSON with its
// line and column, every unknown field), campaign.NewPlan (the values),
// then every task_id of a workspace that runs the default episode server
// against the workbench catalogue (a workspace with its own command serves
// its own tasks). It returns the plan of a valid spec. The error is a
// *campaign.SyntaxError; DecodeSpec's campaign.ValidationErrors (every
// unknown field); or ValidatePlan's: one *campaign.ValidationError, or
// a campaign.ValidationErrors when there are several (NewPlan's first
// error and every unknown task id); or a read error. Each field error
// names its field by path ("workspaces[1].task_id").
func ValidateSpec(r io.Reader) (campaign.CampaignSpec, *campaign.Plan, error) {
	spec, err := campaign.DecodeSpec(r)
	if err != nil {
		return spec, nil, err
	}
	p, err := ValidatePlan(spec)
	return spec, p, err
}

// ValidatePlan is ValidateSpec's second half, for a spec already
// decoded: campaign.NewPlan, then the catalogue.
func ValidatePlan(spec campaign.CampaignSpec) (*campaign.Plan, error) {
	p, perr := campaign.NewPlan(spec)
	errs := fieldErrors(perr)
	// The catalogue is consulted even when NewPlan refused another field,
	// so one answer names every unknown task.
	for i, ws := range spec.Workspaces {
		if len(ws.Command) != 0 {
			continue
		}
		field := fmt.Sprintf("workspaces[%d].task_id", i)
		if campaign.CheckTaskID(field, ws.TaskID) != nil {
			continue // NewPlan names it when it gets there
		}
		if _, err := tasks.Lookup(ws.TaskID); err != nil {
			if slices.ContainsFunc(errs, func(e *campaign.ValidationError) bool { return e.Field == field }) {
				continue
			}
			msg := "is not in the workbench catalogue (workbench tasks lists it)"
			if !errors.Is(err, tasks.ErrUnknownTask) {
				msg = err.Error()
			}
			if _, _, perr := tasks.ParseID(ws.TaskID); perr != nil {
				msg = fmt.Sprintf("has a malformed variant: want domain/family@N with N in 0..%d", tasks.MaxVariant)
			}
			errs = append(errs, &campaign.ValidationError{Field: field, Value: ws.TaskID, Msg: msg})
		}
	}
	if perr != nil && errs == nil {
		return nil, perr // not a field error: kept as it is
	}
	if len(errs) == 1 {
		return nil, errs[0] // as NewPlan returns one
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return p, nil
}

// ValidateSpecBytes is ValidateSpec of a document in memory.
func ValidateSpecBytes(b []byte) (campaign.CampaignSpec, *campaign.Plan, error) {
	return ValidateSpec(bytes.NewReader(b))
}

// fieldErrors flattens err into its field errors (nil for none).
func fieldErrors(err error) campaign.ValidationErrors {
	var list campaign.ValidationErrors
	var one *campaign.ValidationError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &list):
		return slices.Clone(list)
	case errors.As(err, &one):
		return campaign.ValidationErrors{one}
	}
	return nil
}
