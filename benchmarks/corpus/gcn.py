"""Graph convolutional network (Kipf & Welling) on a random citation-like graph."""

import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


class GraphConv(nn.Module):
    def __init__(self, input_dim, output_dim, use_bias=False):
        super().__init__()
        self.kernel = nn.Parameter(torch.empty(input_dim, output_dim))
        nn.init.xavier_normal_(self.kernel)
        self.bias = None
        if use_bias:
            self.bias = nn.Parameter(torch.zeros(output_dim))

    def forward(self, input_tensor, adj_mat):
        support = torch.mm(input_tensor, self.kernel)
        output = torch.spmm(adj_mat, support)
        if self.bias is not None:
            output = output + self.bias
        return output


class GCN(nn.Module):
    def __init__(self, input_dim, hidden_dim, output_dim, use_bias=True, dropout_p=0.1):
        super().__init__()
        self.gc1 = GraphConv(input_dim, hidden_dim, use_bias=use_bias)
        self.gc2 = GraphConv(hidden_dim, output_dim, use_bias=use_bias)
        self.dropout = nn.Dropout(dropout_p)

    def forward(self, input_tensor, adj_mat):
        x = self.gc1(input_tensor, adj_mat)
        x = F.relu(x)
        x = self.dropout(x)
        x = self.gc2(x, adj_mat)
        return F.log_softmax(x, dim=1)


def random_graph(nodes=500, features=64, classes=7, edges=2000, seed=0):
    generator = torch.Generator().manual_seed(seed)
    x = torch.rand(nodes, features, generator=generator)
    labels = torch.randint(0, classes, (nodes,), generator=generator)
    src = torch.randint(0, nodes, (edges,), generator=generator)
    dst = torch.randint(0, nodes, (edges,), generator=generator)
    index = torch.cat([torch.stack([src, dst]), torch.stack([dst, src]), torch.arange(nodes).repeat(2, 1)], dim=1)
    values = torch.ones(index.size(1))
    degree = torch.zeros(nodes).index_add_(0, index[0], values)
    values = values / degree[index[0]].sqrt() / degree[index[1]].sqrt()
    adj = torch.sparse_coo_tensor(index, values, (nodes, nodes)).coalesce()
    return x, labels, adj


def train_iter(epoch, model, optimizer, criterion, inputs, target, mask_train, mask_val, print_every=10):
    start_t = time.time()
    model.train()
    optimizer.zero_grad()
    output = model(*inputs)
    loss = criterion(output[mask_train], target[mask_train])
    loss.backward()
    optimizer.step()
    loss_val, acc_val = test(model, criterion, inputs, target, mask_val)
    if epoch % print_every == 0:
        print(f"Epoch: {epoch:04d} ({(time.time() - start_t):.4f}s) loss_train: {loss.item():.4f} "
              f"loss_val: {loss_val:.4f} acc_val: {acc_val:.4f}")


def test(model, criterion, inputs, target, mask):
    model.eval()
    with torch.no_grad():
        output = model(*inputs)
        output, target = output[mask], target[mask]
        loss = criterion(output, target)
        acc = (output.argmax(dim=1) == target).float().sum() / len(target)
    return loss.item(), acc.item()


def main():
    parser = argparse.ArgumentParser(description="PyTorch Graph Convolutional Network")
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--l2", type=float, default=5e-4)
    parser.add_argument("--dropout-p", type=float, default=0.5)
    parser.add_argument("--hidden-dim", type=int, default=16)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    features, labels, adj_mat = random_graph()
    idx = torch.randperm(len(labels))
    idx_train, idx_val, idx_test = idx[:140], idx[200:500], idx[500:1500]
    gcn = GCN(features.shape[1], args.hidden_dim, int(labels.max()) + 1, True, args.dropout_p)
    optimizer = optim.Adam(gcn.parameters(), lr=args.lr, weight_decay=args.l2)
    criterion = nn.NLLLoss()
    for epoch in range(args.epochs):
        train_iter(epoch + 1, gcn, optimizer, criterion, (features, adj_mat), labels, idx_train, idx_val)
    loss_test, acc_test = test(gcn, criterion, (features, adj_mat), labels, idx_test)
    print(f"Test set results: loss {loss_test:.4f} accuracy {acc_test:.4f} ({math.floor(acc_test * 100)}%)")


if __name__ == "__main__":
    main()
