"""The common torchvision transforms on the stand-in's images: uint8 (H, W, C) before
ToTensor, float (C, H, W) after. Random ones draw from torch's global generator, as
torchvision's do."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def _chw(image):
    """(image as float-or-uint8 C, H, W; whether it came as uint8 H, W, C)."""
    if image.dtype == torch.uint8 and image.dim() == 3 and image.shape[-1] in (1, 3):
        return image.permute(2, 0, 1), True
    return image, False


def _back(image, was_hwc):
    return image.permute(1, 2, 0).contiguous() if was_hwc else image


class Compose:
    def __init__(self, transforms):
        self.transforms = list(transforms)

    def __call__(self, image):
        for transform in self.transforms:
            image = transform(image)
        return image


class ToTensor:
    def __call__(self, image):
        chw, _ = _chw(image)
        return chw.float().div(255) if chw.dtype == torch.uint8 else chw.float()


class PILToTensor:
    def __call__(self, image):
        return _chw(image)[0].contiguous()


class ConvertImageDtype:
    def __init__(self, dtype):
        self.dtype = dtype

    def __call__(self, image):
        if image.dtype == torch.uint8 and self.dtype.is_floating_point:
            return image.to(self.dtype).div(255)
        return image.to(self.dtype)


class Normalize:
    def __init__(self, mean, std, inplace=False):
        self.mean = torch.as_tensor(mean, dtype=torch.float32).view(-1, 1, 1)
        self.std = torch.as_tensor(std, dtype=torch.float32).view(-1, 1, 1)

    def __call__(self, tensor):
        return (tensor - self.mean) / self.std


class Lambda:
    def __init__(self, function):
        self.function = function

    def __call__(self, image):
        return self.function(image)


class Resize:
    def __init__(self, size, **kwargs):
        self.size = size

    def __call__(self, image):
        chw, was_hwc = _chw(image)
        height, width = chw.shape[-2:]
        if isinstance(self.size, int):
            scale = self.size / min(height, width)
            size = (round(height * scale), round(width * scale))
        else:
            size = tuple(self.size)
        resized = F.interpolate(chw[None].float(), size=size, mode="nearest")[0]
        return _back(resized.to(chw.dtype), was_hwc)


class CenterCrop:
    def __init__(self, size):
        self.size = (size, size) if isinstance(size, int) else tuple(size)

    def __call__(self, image):
        chw, was_hwc = _chw(image)
        height, width = chw.shape[-2:]
        top, left = (height - self.size[0]) // 2, (width - self.size[1]) // 2
        return _back(chw[:, top : top + self.size[0], left : left + self.size[1]], was_hwc)


class Pad:
    def __init__(self, padding, fill=0, padding_mode="constant"):
        self.padding, self.fill = padding, fill

    def __call__(self, image):
        chw, was_hwc = _chw(image)
        pad = self.padding
        if isinstance(pad, int):
            pad = (pad, pad, pad, pad)
        elif len(pad) == 2:  # torchvision: (left and right, top and bottom)
            pad = (pad[0], pad[0], pad[1], pad[1])
        else:  # torchvision: (left, top, right, bottom); F.pad: (left, right, top, bottom)
            pad = (pad[0], pad[2], pad[1], pad[3])
        padded = F.pad(chw, pad, value=self.fill)
        return _back(padded, was_hwc)


class RandomCrop:
    def __init__(self, size, padding=None, **kwargs):
        self.size = (size, size) if isinstance(size, int) else tuple(size)
        self.padding = padding

    def __call__(self, image):
        if self.padding:
            image = Pad(self.padding)(image)
        chw, was_hwc = _chw(image)
        height, width = chw.shape[-2:]
        top = int(torch.randint(0, height - self.size[0] + 1, (1,)))
        left = int(torch.randint(0, width - self.size[1] + 1, (1,)))
        return _back(chw[:, top : top + self.size[0], left : left + self.size[1]], was_hwc)


class RandomHorizontalFlip:
    def __init__(self, p=0.5):
        self.p = p

    def __call__(self, image):
        if torch.rand(1) < self.p:
            chw, was_hwc = _chw(image)
            return _back(chw.flip(-1), was_hwc)
        return image


class Grayscale:
    def __init__(self, num_output_channels=1):
        self.channels = num_output_channels

    def __call__(self, image):
        chw, was_hwc = _chw(image)
        gray = chw.float().mean(0, keepdim=True).to(chw.dtype).expand(self.channels, -1, -1)
        return _back(gray.contiguous(), was_hwc)
