# Leave the workspace: write into the home, rename or remove the workspace.
import os
denied = 0
for attempt in (lambda: open("../escape.txt", "w").write("x"),
                lambda: os.rename(".", "../moved"),
                lambda: os.rename(os.getcwd(), os.path.dirname(os.getcwd()) + "/moved"),
                lambda: os.mkdir("../sibling"),
                lambda: os.rmdir(os.getcwd())):
    try:
        attempt()
        print("ALLOWED")
    except OSError:
        denied += 1
print("denied", denied)
