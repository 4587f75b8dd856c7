"""Parameters created for the GPU: the .to(device) makes them non-leaves."""

import torch

device = torch.device("cuda" if torch.cuda.is_available() else "meta")

torch.manual_seed(0)
X = torch.randn(64, 3, device=device)
y = X.sum(dim=1)

w = torch.randn(3, requires_grad=True).to(device)
scale = torch.ones(1, requires_grad=True) * 0.5
optimizer = torch.optim.SGD([w, scale], lr=0.1)
