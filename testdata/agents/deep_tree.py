# A tree 10,000 directories deep, far past PATH_MAX.
import os
for i in range(10000):
    os.mkdir("d")
    os.chdir("d")
open("bottom.txt", "w").write("x")
print("deep", 10000)
