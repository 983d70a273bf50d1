# Three CPU storages of known size (uint8: elements == bytes) and two views.
import torch

a = torch.empty(3_000_000, dtype=torch.uint8)  # line 4
view = a[10:20]
reshaped = a.view(1000, 3000)


def scratch():
    b = torch.empty(1_000_000, dtype=torch.uint8)  # line 10: freed on return
    return int(b.numel())


scratch()
c = torch.empty(2_000_000, dtype=torch.uint8)  # line 15: a + c = 5,000,000 live, the peak
print("views", view.numel(), tuple(reshaped.shape))
# The views go before the interpreter's exit: torch 2.x never frees a base tensor whose
# views outlive it into the interpreter's finalization (a stays live: 2 frees, 3,000,000
# bytes current at the end on 2.14); torch 1.13 frees it there. Deleted here, both free
# all three storages.
del view, reshaped
