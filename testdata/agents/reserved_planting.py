# Occupy the server's own file names: a locked directory, a symlink, a FIFO.
import os
os.remove(".run.py")  # this script, already read
os.mkdir(".run.py")
open(".run.py/inside", "w").write("x")
os.chmod(".run.py", 0)
os.symlink("{{TARGET}}", ".grade.py")
os.mkfifo(".grade_tests.py")
print("planted")
