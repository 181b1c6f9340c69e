object 490e108015cdf7ec559aa8c74c1a51547ea3d58d
type commit
tag v1
tagger a <a@example.invalid> 1700000000 +0000

t
