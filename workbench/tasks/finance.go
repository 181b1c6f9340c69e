package tasks

// financeFamilies are the finance domain's tasks.
func financeFamilies() []Family {
	return nil
}
