"""Reduction of pypi:sdgym==0.2.1 sdgym/synthesizers/veegan.py ``fit`` (cases loop-001, loop-002).

Three optimizers step between backwards of one graph: D's step changes weights that G's loss
graph saved (M4 at ``loss_g.backward()``); with D's step moved after it, G's step changes weights
that R's loss graph saved (M4 at ``loss_r.backward()``). Run: ``python corpus/reductions/loop_veegan.py``.
"""
import torch
from torch import nn
from torch.nn.functional import mse_loss

M4 = "one of the variables needed for gradient computation has been modified by an inplace operation"


def step(models, optimizers, d_step: bool) -> str:
    G, D, R = models
    opt_g, opt_d, opt_r = optimizers
    real = torch.randn(16, 3)
    y_real = D(torch.cat([real, R(real)], 1))
    fakez = torch.randn(16, 4)
    fake = G(fakez)
    y_fake = D(torch.cat([fake, fakez], 1))
    loss_d = -(torch.log(torch.sigmoid(y_real) + 1e-4).mean()) - torch.log(1.0 - torch.sigmoid(y_fake) + 1e-4).mean()
    numerator = -y_fake.mean() + mse_loss(R(fake), fakez)
    loss_g, loss_r = numerator / 4, numerator / 4
    try:
        opt_d.zero_grad()
        loss_d.backward(retain_graph=True)
        if d_step:
            opt_d.step()
        opt_g.zero_grad()
        loss_g.backward(retain_graph=True)
        if not d_step:
            opt_d.step()
        opt_g.step()
        opt_r.zero_grad()
        loss_r.backward()
        opt_r.step()
    except RuntimeError as error:
        return "M4" if M4 in str(error) else str(error)
    return "ok"


if __name__ == "__main__":
    torch.manual_seed(0)
    G = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    D = nn.Sequential(nn.Linear(7, 8), nn.ReLU(), nn.Linear(8, 1))
    R = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 4))
    optimizers = tuple(torch.optim.Adam(m.parameters()) for m in (G, D, R))
    assert step((G, D, R), optimizers, d_step=True) == "M4"  # loop-001, as written
    assert step((G, D, R), optimizers, d_step=False) == "M4"  # loop-002, D's step moved after G's backward
    print("both M4, as labelled")
