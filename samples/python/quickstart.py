"""A small training loop to profile: `memtool run -- python samples/python/quickstart.py`.

An MLP learns y = sum(x) on random data with Adam. Nothing here knows about memtool.
"""
import torch

torch.manual_seed(0)


def make_batch(batch, features):
    x = torch.randn(batch, features)
    y = x.sum(dim=1, keepdim=True)
    return x, y


def build_model(features, hidden):
    return torch.nn.Sequential(
        torch.nn.Linear(features, hidden),
        torch.nn.ReLU(),
        torch.nn.Linear(hidden, hidden),
        torch.nn.ReLU(),
        torch.nn.Linear(hidden, 1),
    )


def train(steps=30, batch=256, features=64, hidden=512):
    model = build_model(features, hidden)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss = None
    for _ in range(steps):
        x, y = make_batch(batch, features)
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
    return loss.item()


if __name__ == "__main__":
    print(f"final loss {train():.4f}")
