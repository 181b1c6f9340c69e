package launcher

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/agentpen/agentpen/api"
	"github.com/agentpen/agentpen/workbench/tasks"
	"github.com/danielgtaylor/huma/v2"
)

// TaskSummary is one family of the workbench catalogue, as GET /v1/tasks
// and agentpen tasks list it: the ids workbench tasks --json lists.
type TaskSummary struct {
	ID         string `json:"id" doc:"The task id (domain/family): a workspace's task_id; domain/family@N is its variant N"`
	Domain     string `json:"domain" doc:"The work domain"`
	Title      string `json:"title" doc:"What the task asks, in one line"`
	AnswerKind string `json:"answer_kind" enum:"code,number,text,set,list" doc:"How the answer is graded: code (a fixed solution.py), number, text, set or list"`
}

// TaskFile is one file of a task's workspace.
type TaskFile struct {
	Path    string `json:"path" doc:"Its path in the episode's workspace"`
	Bytes   int    `json:"bytes" doc:"Its size"`
	Content string `json:"content" doc:"Its content, as the agent finds it"`
}

// Task is what an agent sees of one task at reset: its prompt and its
// workspace's files. Never its answer, and never a hidden case.
type Task struct {
	TaskSummary
	Prompt string     `json:"prompt" doc:"The instruction the agent gets at reset"`
	Files  []TaskFile `json:"files" doc:"The workspace's files at reset, sorted by path"`
}

// TaskList is the catalogue (GET /v1/tasks, agentpen tasks --json).
func TaskList() []TaskSummary {
	specs := tasks.Specs()
	out := make([]TaskSummary, len(specs))
	for i, s := range specs {
		out[i] = TaskSummary{ID: s.ID, Domain: s.Domain, Title: s.Summary, AnswerKind: string(s.Kind)}
	}
	return out
}

// ErrUnknownTask is the kind of LookupTask's error for an id the
// catalogue does not serve.
var ErrUnknownTask = tasks.ErrUnknownTask

// LookupTask is what an agent sees of the task id (GET /v1/tasks/{id},
// agentpen tasks ID): built as a reset builds it, without its key.
func LookupTask(id string) (*Task, error) {
	t, err := tasks.Build(id)
	if err != nil {
		return nil, err
	}
	out := &Task{TaskSummary: TaskSummary{ID: t.TaskID, Domain: t.Domain, Title: t.Summary, AnswerKind: string(t.Kind)},
		Prompt: t.Instruction, Files: make([]TaskFile, len(t.Files))}
	for i, f := range t.Files {
		out.Files[i] = TaskFile{Path: f.Path, Bytes: len(f.Content), Content: f.Content}
	}
	return out, nil
}

type taskListOutput struct {
	Body struct {
		Tasks []TaskSummary `json:"tasks"`
	}
}

type taskIDParam struct {
	ID string `path:"id" doc:"A task id (domain/family, or domain/family@N), its slash escaped as %2F"`
}

type taskOutput struct {
	Body *Task
}

type imagesOutput struct {
	Body struct {
		Images []api.Image `json:"images"`
	}
}

// registerCatalogue registers what a launcher needs to write a spec:
// the tasks and the daemon's images.
func (s *Server) registerCatalogue(hapi huma.API) {
	huma.Register(hapi, huma.Operation{
		OperationID: "listTasks", Method: http.MethodGet, Path: "/v1/tasks", Tags: []string{"catalogue"},
		Summary: "The workbench's task catalogue: the task_ids a workspace may name (as workbench tasks --json lists them)",
		Errors:  []int{http.StatusUnauthorized},
	}, func(ctx context.Context, _ *struct{}) (*taskListOutput, error) {
		out := &taskListOutput{}
		out.Body.Tasks = TaskList()
		return out, nil
	})
	huma.Register(hapi, huma.Operation{
		OperationID: "getTask", Method: http.MethodGet, Path: "/v1/tasks/{id}", Tags: []string{"catalogue"},
		Summary: "What an agent sees of a task at reset: its prompt and its workspace's files (never its answer or a hidden case)",
		Description: "The id's slash is a path segment's: escape it (GET /v1/tasks/software%2Fmedian@2). " +
			"An id without @N is variant 0.",
		Errors: []int{http.StatusUnauthorized, http.StatusNotFound},
	}, func(ctx context.Context, in *taskIDParam) (*taskOutput, error) {
		t, err := LookupTask(in.ID)
		if errors.Is(err, ErrUnknownTask) {
			return nil, problem(http.StatusNotFound, fmt.Sprintf("no task %q in the workbench catalogue (GET /v1/tasks lists it)", in.ID))
		}
		if err != nil {
			return nil, problem(http.StatusInternalServerError, "task: "+err.Error())
		}
		return &taskOutput{Body: t}, nil
	})
	huma.Register(hapi, huma.Operation{
		OperationID: "listImages", Method: http.MethodGet, Path: "/v1/images", Tags: []string{"catalogue"},
		Summary: "The daemon's local images a spec can name, newest first: id, tags, when built, and the workbench version each carries",
		Description: "A spec names an image by its id or by one of its tags; a tag is resolved to the image's id when " +
			"the campaign is created, and the campaign runs that id from then on. Images are never pulled.",
		Errors: []int{http.StatusUnauthorized, http.StatusInternalServerError, http.StatusServiceUnavailable},
	}, func(ctx context.Context, _ *struct{}) (*imagesOutput, error) {
		imgs, err := s.be.Images(ctx)
		if err != nil {
			return nil, operationProblem("list images", err)
		}
		out := &imagesOutput{}
		out.Body.Images = imgs
		return out, nil
	})
}
