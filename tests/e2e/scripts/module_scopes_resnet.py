# A torchvision resnet18, two training steps with SGD's momentum, under
# `memtool run --modules`: what no module's forward or backward made is the
# model's construction, the batch, the optimizer's state and, per backward,
# the 4-byte gradient of the loss that autograd starts from.
import torch
import torchvision

torch.manual_seed(0)
model = torchvision.models.resnet18()  # line 9
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
x = torch.randn(2, 3, 64, 64)  # line 11
y = torch.randint(0, 1000, (2,))  # line 12
loss_fn = torch.nn.CrossEntropyLoss()
for step in range(2):
    opt.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()  # line 17
    opt.step()  # line 18
state = sum(t.untyped_storage().nbytes() for t in list(model.parameters()) + list(model.buffers()))
momentum = sum(s["momentum_buffer"].untyped_storage().nbytes() for s in opt.state.values())
print("model", state, "momentum", momentum, "batch", x.untyped_storage().nbytes() + y.untyped_storage().nbytes(),
      "parameters", len(list(model.parameters())))
