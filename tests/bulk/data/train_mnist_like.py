"""Train a small classifier on synthetic MNIST-shaped data (one device, no distribution)."""

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(28 * 28, 64)
        self.out = nn.Linear(64, 10)

    def forward(self, x):
        return self.out(F.relu(self.hidden(x.flatten(1))))


def main():
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    images = torch.randn(256, 1, 28, 28)
    labels = torch.randint(0, 10, (256,))
    train_loader = DataLoader(TensorDataset(images, labels), batch_size=32, shuffle=True)
    model = Net().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(2):
        model.train()
        for data, target in train_loader:
            data, target = data.to(device), target.to(device)
            optimizer.zero_grad()
            loss = F.cross_entropy(model(data), target)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
