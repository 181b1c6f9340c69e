# Take every permission away from its own files, directories and workspace.
import os
os.makedirs("locked/inner/deeper")
open("locked/inner/deeper/f.txt", "w").write("x")
open("locked/g.txt", "w").write("x")
for p in ("locked/inner/deeper/f.txt", "locked/inner/deeper", "locked/inner", "locked/g.txt", "locked"):
    os.chmod(p, 0)
os.chmod(".", 0)
print("locked")
