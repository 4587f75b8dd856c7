"""Training with an optimizer: the gradients are never zeroed, and the loss
history keeps every step's autograd graph alive."""

import torch
import torch.nn as nn

torch.manual_seed(0)
X = torch.randn(64, 3)
y = X @ torch.tensor([1.0, -2.0, 0.5])

model = nn.Linear(3, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
history = []

for step in range(30):
    loss = ((model(X).squeeze(1) - y) ** 2).mean()
    loss.backward()  # gradients add up: nothing zeroes them
    optimizer.step()
    history.append(loss)  # keeps the graph of every step

print(f"first loss {history[0].item():.4f}, last loss {history[-1].item():.4f}")
