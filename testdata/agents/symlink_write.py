# Links the server might write through: to a root file and to /etc.
import os
os.symlink("{{TARGET}}", "note.txt")
os.symlink("/etc", "out")
os.symlink("/nonexistent-ep3-dangling", "dangling.txt")
print("planted")
