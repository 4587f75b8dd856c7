"""Sub-pixel convolution super-resolution with a perceptual-style loss and gradient accumulation."""

import argparse
from math import log10

import torch
import torch.nn as nn
import torch.nn.init as init
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset


class SuperResolutionNet(nn.Module):
    def __init__(self, upscale_factor):
        super().__init__()
        self.relu = nn.ReLU()
        self.conv1 = nn.Conv2d(1, 64, (5, 5), (1, 1), (2, 2))
        self.conv2 = nn.Conv2d(64, 64, (3, 3), (1, 1), (1, 1))
        self.conv3 = nn.Conv2d(64, 32, (3, 3), (1, 1), (1, 1))
        self.conv4 = nn.Conv2d(32, upscale_factor**2, (3, 3), (1, 1), (1, 1))
        self.pixel_shuffle = nn.PixelShuffle(upscale_factor)
        self._initialize_weights()

    def forward(self, x):
        x = self.relu(self.conv1(x))
        x = self.relu(self.conv2(x))
        x = self.relu(self.conv3(x))
        return self.pixel_shuffle(self.conv4(x))

    def _initialize_weights(self):
        init.orthogonal_(self.conv1.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv2.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv3.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv4.weight)


class TotalVariation(nn.Module):
    def forward(self, image):
        dx = image[:, :, 1:, :] - image[:, :, :-1, :]
        dy = image[:, :, :, 1:] - image[:, :, :, :-1]
        return dx.abs().mean() + dy.abs().mean()


def make_dataset(count, size, upscale_factor, seed):
    generator = torch.Generator().manual_seed(seed)
    targets = torch.rand(count, 1, size * upscale_factor, size * upscale_factor, generator=generator)
    inputs = nn.functional.avg_pool2d(targets, upscale_factor)
    return TensorDataset(inputs, targets)


def train(epoch, model, criterion, tv, optimizer, loader, accumulation_steps, tv_weight):
    epoch_loss = 0.0
    optimizer.zero_grad()
    for iteration, (input, target) in enumerate(loader, 1):
        output = model(input)
        loss = criterion(output, target) + tv_weight * tv(output)
        (loss / accumulation_steps).backward()
        if iteration % accumulation_steps == 0:
            nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
            optimizer.step()
            optimizer.zero_grad()
        epoch_loss += loss.item()
        print(f"===> Epoch[{epoch}]({iteration}/{len(loader)}): Loss: {loss.item():.4f}")
    print(f"===> Epoch {epoch} Complete: Avg. Loss: {epoch_loss / len(loader):.4f}")


def test(model, criterion, loader):
    avg_psnr = 0
    with torch.no_grad():
        for input, target in loader:
            prediction = model(input)
            mse = criterion(prediction, target)
            avg_psnr += 10 * log10(1 / mse.item())
    print(f"===> Avg. PSNR: {avg_psnr / len(loader):.4f} dB")


def main():
    parser = argparse.ArgumentParser(description="PyTorch Super Res Example")
    parser.add_argument("--upscale_factor", type=int, default=3)
    parser.add_argument("--batchSize", type=int, default=16)
    parser.add_argument("--nEpochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--accumulation-steps", type=int, default=2)
    parser.add_argument("--tv-weight", type=float, default=1e-4)
    parser.add_argument("--seed", type=int, default=123)
    opt = parser.parse_args()
    torch.manual_seed(opt.seed)
    training_data_loader = DataLoader(make_dataset(64, 32, opt.upscale_factor, 0), batch_size=opt.batchSize, shuffle=True)
    testing_data_loader = DataLoader(make_dataset(16, 32, opt.upscale_factor, 1), batch_size=opt.batchSize)
    model = SuperResolutionNet(upscale_factor=opt.upscale_factor)
    criterion = nn.MSELoss()
    optimizer = optim.Adam(model.parameters(), lr=opt.lr)
    tv = TotalVariation()
    for epoch in range(1, opt.nEpochs + 1):
        train(epoch, model, criterion, tv, optimizer, training_data_loader, opt.accumulation_steps, opt.tv_weight)
        test(model, criterion, testing_data_loader)
        torch.save(model, f"model_epoch_{epoch}.pth")


if __name__ == "__main__":
    main()
