package tasks

// securityFamilies are the security domain's tasks.
func securityFamilies() []Family {
	return nil
}
