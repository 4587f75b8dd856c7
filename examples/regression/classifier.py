"""A small classifier with a hand-rolled update through an nn.Module."""

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
X = torch.randn(128, 4)
labels = (X[:, 0] > 0).long()

model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
class_weights = torch.tensor([1, 2], requires_grad=True)  # integer data cannot require grad
temperature = torch.ones(1)
temperature.require_grad = True  # typo: sets an unused attribute


def sgd_step(parameters, lr):
    for p in parameters:
        p -= lr * p.grad  # in-place on a leaf with grad mode on


for epoch in range(20):
    logits = model(X) / temperature
    loss = F.cross_entropy(logits, labels)
    model.zero_grad()
    loss.backward()
    sgd_step(model.parameters(), lr=0.5)
