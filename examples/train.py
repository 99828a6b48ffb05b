"""A small image classifier trained the single-device way: the kind of script `migrate` is for.

Run it as is (`python examples/train.py --epochs 1`), then see what `migrate examples/train.py`
changes so it runs on any number of processes with `migrate launch --nproc 2 examples/train.py`.
"""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, TensorDataset


class SmallCNN(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.conv = nn.Conv2d(1, 8, kernel_size=3)
        self.head = nn.Linear(8 * 13 * 13, classes)

    def forward(self, images):
        features = F.max_pool2d(F.relu(self.conv(images)), 2)
        return self.head(torch.flatten(features, 1))


def synthetic_digits(count, seed):
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 10, (count,), generator=generator)
    images = torch.rand(count, 1, 28, 28, generator=generator) * 0.1
    images[torch.arange(count), 0, labels * 2 + 4, 4:24] = 1.0  # one bright row per class
    return TensorDataset(images, labels)


def train_epoch(model, loader, optimizer, device, epoch):
    model.train()
    for step, (images, labels) in enumerate(loader):
        images, labels = images.to(device), labels.to(device)
        optimizer.zero_grad()
        loss = F.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
        if step % 10 == 0:
            print(f"epoch {epoch} step {step}: loss {loss.item():.4f}")


def evaluate(model, loader, device):
    model.eval()
    correct = 0
    with torch.no_grad():
        for images, labels in loader:
            images, labels = images.to(device), labels.to(device)
            correct += (model(images).argmax(dim=1) == labels).sum().item()
    return correct / len(loader.dataset)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.05)
    args = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    train_loader = DataLoader(synthetic_digits(640, seed=1), batch_size=args.batch_size, shuffle=True)
    test_loader = DataLoader(synthetic_digits(256, seed=2), batch_size=args.batch_size)

    model = SmallCNN().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    scheduler = StepLR(optimizer, step_size=1, gamma=0.7)

    for epoch in range(1, args.epochs + 1):
        train_epoch(model, train_loader, optimizer, device, epoch)
        print(f"epoch {epoch}: test accuracy {evaluate(model, test_loader, device):.3f}")
        scheduler.step()


if __name__ == "__main__":
    main()
