"""8 Python threads allocating small tensors at once (N in all)."""
import sys
import threading

import torch


def work(n):
    for _ in range(n):
        t = torch.empty(64)
        del t


if __name__ == "__main__":
    total = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    threads = [threading.Thread(target=work, args=(total // 8,)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(total)
