# Two unnamed tensors that only a tuple holds, and no other tensor unnamed: what
# pytorch_memlab's README LSTM case leaves (`out, _ = lstm(inp)` keeps h_n and c_n in
# the tuple `_`). They are visible (LiveInsightTest.cpp); the reachability walk took
# such a tuple, of exactly its candidates, for get_referrers' own arguments.
import torch

import memtool

torch.set_num_threads(1)
held = (torch.ones(10_000), torch.ones(20_000))  # 40,000 B and 80,000 B
memtool.report_tensors()
