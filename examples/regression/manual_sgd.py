"""Linear regression with a hand-written SGD loop."""

import torch

torch.manual_seed(0)
X = torch.randn(64, 3)
y = X @ torch.tensor([1.0, -2.0, 0.5]) + 0.3

w = torch.randn(3, requires_grad=True)
b = torch.zeros(1, requires_grad=True)
lr = 0.1

for step in range(50):
    loss = ((X @ w + b - y) ** 2).mean()
    loss.backward()
    # The classic mistake: w becomes a non-leaf, w.grad is None next step.
    w = w - lr * w.grad
    # Raises "a leaf Variable that requires grad is being used in an in-place operation".
    b -= lr * b.grad
    w.grad = None
    b.grad = None

print(f"final loss {loss.item():.4f}")
