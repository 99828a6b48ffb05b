"""MNIST-, FashionMNIST-, CIFAR-shaped datasets of synthetic images: each class has a fixed
random template; an image is its class's template plus noise, as uint8 (H, W, C) like the PIL
images torchvision returns. Deterministic, drawn from a private generator (the global random
stream is left alone). Sizes: STANDIN_TRAIN_SIZE (default 6000) and STANDIN_TEST_SIZE (1000)."""

from __future__ import annotations

import os
import zlib

import torch
from torch.utils.data import Dataset


class _Synthetic(Dataset):
    shape = (28, 28, 1)
    num_classes = 10
    sparse = False  # MNIST: most pixels exactly 0, like the real digits' background

    def __init__(
        self, root=None, train=True, transform=None, target_transform=None, download=False
    ):
        self.root, self.train = root, train
        self.transform, self.target_transform = transform, target_transform
        default = "6000" if train else "1000"
        size = int(os.environ.get("STANDIN_TRAIN_SIZE" if train else "STANDIN_TEST_SIZE", default))
        seed = zlib.crc32(f"{type(self).__name__}:{train}".encode())
        generator = torch.Generator().manual_seed(seed)
        templates = torch.rand(self.num_classes, *self.shape, generator=generator)
        if self.sparse:
            templates = (templates - 0.55).clamp(min=0) / 0.45
        self.targets = torch.randint(0, self.num_classes, (size,), generator=generator)
        noise = torch.rand(size, *self.shape, generator=generator)
        images = 0.7 * templates[self.targets] + 0.3 * noise
        if self.sparse:
            images = images * (templates[self.targets] > 0)
        self.data = (images * 255).round().to(torch.uint8)
        self.classes = [str(index) for index in range(self.num_classes)]

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, index):
        image, target = self.data[index], int(self.targets[index])
        if self.transform is not None:
            image = self.transform(image)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return image, target


class MNIST(_Synthetic):
    sparse = True


class FashionMNIST(_Synthetic):
    pass


class KMNIST(_Synthetic):
    sparse = True


class CIFAR10(_Synthetic):
    shape = (32, 32, 3)


class CIFAR100(CIFAR10):
    num_classes = 100
