# Links to files only root may read, to be opened by the server.
import os
os.symlink("/etc/shadow", "shadow")
os.symlink("/etc", "etc")
os.symlink("{{TARGET}}", "target")
print("linked")
