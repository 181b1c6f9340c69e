package tasks

// configFamilies are the config domain's tasks.
func configFamilies() []Family {
	return nil
}
