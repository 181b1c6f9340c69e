package tasks

// sqlFamilies are the sql domain's tasks.
func sqlFamilies() []Family {
	return nil
}
