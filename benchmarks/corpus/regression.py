"""Polynomial regression with hand-written parameter updates (the classic tutorial form)."""

import torch

POLY_DEGREE = 4
W_target = torch.randn(POLY_DEGREE, 1) * 5
b_target = torch.randn(1) * 5


def make_features(x):
    """Builds features i.e. a matrix with columns [x, x^2, x^3, x^4]."""
    x = x.unsqueeze(1)
    return torch.cat([x**i for i in range(1, POLY_DEGREE + 1)], 1)


def f(x):
    return x.mm(W_target) + b_target.item()


def poly_desc(W, b):
    result = "y = "
    for i, w in enumerate(W):
        result += f"{w:+.2f} x^{i + 1} "
    result += f"{b[0]:+.2f}"
    return result


def get_batch(batch_size=32):
    random = torch.randn(batch_size)
    x = make_features(random)
    y = f(x)
    return x, y


def train_module(steps=200, lr=0.1):
    fc = torch.nn.Linear(W_target.size(0), 1)
    for batch_idx in range(steps):
        batch_x, batch_y = get_batch()
        fc.zero_grad()
        output = torch.nn.functional.smooth_l1_loss(fc(batch_x), batch_y)
        loss = output.item()
        output.backward()
        for param in fc.parameters():
            param.data.add_(-lr * param.grad)
        if loss < 1e-3:
            break
    print(f"Loss: {loss:.6f} after {batch_idx} batches")
    print("==> Learned function:\t" + poly_desc(fc.weight.view(-1), fc.bias))
    print("==> Actual function:\t" + poly_desc(W_target.view(-1), b_target))


def train_manual(steps=500, lr=1e-3):
    w = torch.randn(POLY_DEGREE, 1, requires_grad=True)
    b = torch.zeros(1, requires_grad=True)
    for step in range(steps):
        batch_x, batch_y = get_batch()
        prediction = batch_x.mm(w) + b
        loss = (prediction - batch_y).pow(2).mean()
        loss.backward()
        w = w - lr * w.grad  # a classic mistake: w stops being a leaf
        with torch.no_grad():
            b -= lr * b.grad
            b.grad.zero_()
        if step % 100 == 0:
            print(step, loss.item())
    return w, b


def train_manual_fixed(steps=500, lr=1e-3):
    w = torch.randn(POLY_DEGREE, 1, requires_grad=True)
    b = torch.zeros(1, requires_grad=True)
    for _ in range(steps):
        batch_x, batch_y = get_batch()
        loss = (batch_x.mm(w) + b - batch_y).pow(2).mean()
        loss.backward()
        with torch.no_grad():
            w -= lr * w.grad
            b -= lr * b.grad
        w.grad = None
        b.grad = None
    return w, b


if __name__ == "__main__":
    train_module()
    train_manual()
    train_manual_fixed()
