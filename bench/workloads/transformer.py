"""Real program: a TransformerEncoder (torch.nn), forward and backward with Adam.
Usage: transformer.py [STEPS] [BATCH] [SEQ]"""
import sys

import torch


def train(steps, batch, seq):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=128, nhead=4, dim_feedforward=512, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, num_layers=2)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    for _ in range(steps):
        x = torch.randn(batch, seq, 128)
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
    return float(loss)


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:]] + [10, 16, 64][len(sys.argv) - 1:]
    print(train(*args[:3]))
