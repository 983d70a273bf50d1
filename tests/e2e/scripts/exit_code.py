import sys

import torch

x = torch.empty(1000, dtype=torch.uint8)
print("stdout passes through")
print("stderr passes through", file=sys.stderr)
sys.exit(int(sys.argv[1]))
