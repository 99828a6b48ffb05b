"""A seed-shaped script as the migrator emits it: MNIST-like CNN, linear-decay schedule sized
on len(train_loader) after prepare, dict batches, eval accuracy through gather_for_metrics."""

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

from runtime import Accelerator


class Digits(Dataset):
    """Synthetic 1x12x12 images whose label is the brightest quadrant."""

    def __init__(self, count, seed):
        generator = torch.Generator().manual_seed(seed)
        self.images = torch.rand(count, 1, 12, 12, generator=generator)
        quadrants = self.images.unfold(2, 6, 6).unfold(3, 6, 6).sum(dim=(-1, -2)).flatten(1)
        self.labels = quadrants.argmax(dim=1)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, index):
        return {"pixels": self.images[index], "label": self.labels[index]}


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 4, 3)
        self.fc = torch.nn.Linear(4 * 5 * 5, 4)

    def forward(self, pixels):
        return self.fc(F.max_pool2d(F.relu(self.conv(pixels)), 2).flatten(1))


def main():
    accelerator = Accelerator()
    torch.manual_seed(0)
    train_loader = DataLoader(Digits(128, seed=1), batch_size=16, shuffle=True)
    test_loader = DataLoader(Digits(70, seed=2), batch_size=16)
    model = Net()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model, optimizer, train_loader, test_loader = accelerator.prepare(
        model, optimizer, train_loader, test_loader
    )
    epochs = 3
    num_training_steps = epochs * len(train_loader)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: 1 - step / num_training_steps
    )
    for epoch in range(epochs):
        model.train()
        for batch in train_loader:
            loss = F.cross_entropy(model(batch["pixels"]), batch["label"])
            accelerator.backward(loss)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
        model.eval()
        correct, seen = 0, 0
        with torch.no_grad():
            for batch in test_loader:
                predictions = model(batch["pixels"]).argmax(dim=1)
                predictions, labels = accelerator.gather_for_metrics((predictions, batch["label"]))
                correct += (predictions == labels).sum().item()
                seen += len(labels)
        accuracy = 100.0 * correct / len(test_loader.dataset)
        accelerator.print(
            f"epoch {epoch} seen {seen} accuracy {accuracy:.4f} lr {scheduler.get_last_lr()[0]:.6f}"
        )
    weights = accelerator.unwrap_model(model).fc.weight
    accelerator.print(f"checksum {weights.sum().item():.5f}")


if __name__ == "__main__":
    main()
