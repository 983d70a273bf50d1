# Prints its arguments, one line, as the program saw them.
import sys

print(" ".join(sys.argv[1:]))
