package tasks

// documentFamilies are the documents domain's tasks.
func documentFamilies() []Family {
	return nil
}
