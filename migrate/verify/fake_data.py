"""Small synthetic stand-ins for torchvision's downloaded datasets (`migrate verify --fake-data`).

`install_fake_datasets()` runs inside each training process the verify runner starts, after torch
is imported and before the user's script. It replaces the dataset classes in `torchvision.datasets`
(and in the submodule that defines each one, e.g. `torchvision.datasets.mnist.MNIST`, so
`from torchvision.datasets import MNIST` and `torchvision.datasets.MNIST` both see the fake) with
subclasses that:

- accept the real constructor signatures (`root`, `train=` / `split=`, `transform`,
  `target_transform`, `download`, and any other keyword, ignored) and never touch the disk or
  the network: `root` is only a name;
- hold, per split, the number of items LENGTHS gives (see "Lengths" below); the content is a
  function of the dataset, the split and the item's index (MNIST, CIFAR, SVHN and STL10 arrays:
  of the split), so every rank and every run sees the same data;
- return items of the real types and shapes (PIL images of the real size and mode, int targets)
  through the transforms the script passes, like the real `__getitem__`;
- expose the attributes scripts read: `.data` and `.targets` in the real layout (a uint8 tensor
  N x 28 x 28 for the MNIST family, a uint8 array N x 32 x 32 x 3 for CIFAR, N x 3 x H x W for SVHN
  and STL10), `.classes`, `.class_to_idx`, `.samples`/`.imgs` for folders, and MNIST's old names
  `train_data`, `test_data`, `train_labels`, `test_labels`.

Each image is noise with a brighter band of rows whose place depends on the label, so a model can
learn something in a few steps. Folder datasets (`ImageFolder`, `DatasetFolder`, `ImageNet`) have
4 classes (10 for ImageNet), take the size of the validation split when the folder's name starts
with "val" or "test", and ignore the script's `loader`: their samples are PIL images.

The fakes are subclasses of the real classes (`isinstance` still holds and class attributes such
as `MNIST.classes` are the real ones) created when this function runs; they are also published
as attributes of this module, so DataLoader workers started with spawn can unpickle a dataset.

torchtext datasets are not replaced: they are datapipes over downloaded archives, with nothing
small to stand in for them.

Lengths: a script written for the real data may rely on how it divides: `x.reshape(100, -1)` works
on MNIST's 60000 training images at batch 100 on 1 or 2 ranks because no batch is short, and
breaks on a fake of 512 items (a last batch of 12). So each fake split divides like the real one:
for every batch size b in COMMON_BATCHES and world size w from 1 to 8, b*w divides the fake length
exactly when it divides the real one, except where b*w is a multiple of 125 (batches of 125, 250,
500 or 1000 on some world sizes, any batch that is a multiple of 25 on 5 ranks). The fake length
is the real one with large factors taken out: MNIST's 60000 = 2^5*3*5^4 becomes 12000 =
2^5*3*5^3 and its 10000 = 2^4*5^4 becomes 2000; CIFAR's 50000 and 10000 become 2000; a length
that no even batch divides stays odd (SVHN's 73257 = 3*24419 becomes 1257 = 3*419, ImageNet's
1281167 becomes 1283), and so on (LENGTHS holds each real length beside its fake; VOC's are the
real ones, already small). Folders (ImageFolder, DatasetFolder, LSUN) have no known length: 3200
= 2^7*5^2 items for training (divisible by 8..128 and by 100, 200, 400...), 800 for validation.
"""

from __future__ import annotations

import os
import sys
import zlib
from collections.abc import Callable
from typing import Any

COMMON_BATCHES = (1, 2, 4, 8, 10, 12, 16, 20, 24, 25, 32, 48, 50, 64, 96, 100, 128, 200, 250, 256, 500, 512, 1000, 1024)
_MNIST: dict[str, tuple[int | None, int]] = {"train": (60000, 12000), "test": (10000, 2000)}
_CIFAR: dict[str, tuple[int | None, int]] = {"train": (50000, 2000), "test": (10000, 2000)}
_EMNIST_BYCLASS: dict[str, tuple[int | None, int]] = {"train": (697932, 1332), "test": (116323, 1163)}
_FOLDER: dict[str, tuple[int | None, int]] = {"train": (None, 3200), "test": (None, 800)}
# dataset (EMNIST: /split) -> split -> (the real length, or None where unknown; the fake length)
LENGTHS: dict[str, dict[str, tuple[int | None, int]]] = {
    "MNIST": _MNIST, "FashionMNIST": _MNIST, "KMNIST": _MNIST, "EMNIST/mnist": _MNIST,
    "EMNIST/letters": {"train": (124800, 9600), "test": (20800, 1600)},
    "EMNIST/balanced": {"train": (112800, 2400), "test": (18800, 400)},
    "EMNIST/digits": {"train": (240000, 9600), "test": (40000, 1600)},
    "EMNIST/byclass": _EMNIST_BYCLASS, "EMNIST/bymerge": _EMNIST_BYCLASS,
    "QMNIST": {"train": (60000, 12000), "test": (60000, 12000), "test10k": (10000, 2000), "test50k": (50000, 2000),
               "nist": (402953, 1163)},
    "CIFAR10": _CIFAR, "CIFAR100": _CIFAR,
    "SVHN": {"train": (73257, 1257), "test": (26032, 1616), "extra": (531131, 1261)},
    "STL10": {"train": (5000, 1000), "test": (8000, 1600), "unlabeled": (100000, 800), "train+unlabeled": (105000, 4200)},
    "CelebA": {"train": (162770, 410), "valid": (19867, 199), "test": (19962, 1818), "all": (202599, 2427)},
    "ImageNet": {"train": (1281167, 1283), "val": (50000, 2000)},
    "VOCSegmentation": {"train": (1464, 1464), "val": (1449, 1449), "trainval": (2913, 2913)},
    "ImageFolder": _FOLDER, "DatasetFolder": _FOLDER, "LSUN": _FOLDER,
}
FOLDER_IMAGE_SIZE = (64, 64)  # height, width of ImageFolder / DatasetFolder / ImageNet / LSUN items

_installed: list[str] | None = None

# The 40 attribute names of CelebA's list_attr_celeba.txt, in its order.
CELEBA_ATTRIBUTES = (
    "5_o_Clock_Shadow Arched_Eyebrows Attractive Bags_Under_Eyes Bald Bangs Big_Lips Big_Nose Black_Hair "
    "Blond_Hair Blurry Brown_Hair Bushy_Eyebrows Chubby Double_Chin Eyeglasses Goatee Gray_Hair "
    "Heavy_Makeup High_Cheekbones Male Mouth_Slightly_Open Mustache Narrow_Eyes No_Beard Oval_Face "
    "Pale_Skin Pointy_Nose Receding_Hairline Rosy_Cheeks Sideburns Smiling Straight_Hair Wavy_Hair "
    "Wearing_Earrings Wearing_Hat Wearing_Lipstick Wearing_Necklace Wearing_Necktie Young"
).split()
CIFAR10_CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
STL10_CLASSES = ["airplane", "bird", "car", "cat", "deer", "dog", "horse", "monkey", "ship", "truck"]


# ---------------------------------------------------------------------------------------------
# Deterministic content


def _rng(*parts: str | int) -> Any:
    """A numpy generator seeded by `parts` only (crc32 of strings: Python's hash() is salted)."""
    import numpy as np

    return np.random.default_rng([zlib.crc32(p.encode()) if isinstance(p, str) else int(p) for p in parts])


def _label(key: str, index: int, num_classes: int) -> int:
    return int(_rng(key, "label", index).integers(num_classes))


def _image(key: str, index: int | str, shape: tuple[int, ...], label: int, num_classes: int) -> Any:
    """uint8 array of `shape` (H x W or H x W x C): noise, plus a bright band of rows placed by label."""
    import numpy as np

    image = _rng(key, "image", index if isinstance(index, int) else zlib.crc32(index.encode())).integers(
        0, 160, size=shape, dtype=np.uint8
    )
    height = shape[0]
    top = (label % num_classes) * height // num_classes
    image[top : max(top + 1, (label % num_classes + 1) * height // num_classes)] += 95
    return image


def _stack(key: str, size: int, shape: tuple[int, ...], num_classes: int, first_label: int = 0) -> tuple[Any, Any]:
    """`size` images and their labels (first_label .. first_label + num_classes - 1) as numpy
    arrays, made at once from one generator seeded by `key` (12000 MNIST images in a blink)."""
    import numpy as np

    rng = _rng(key, "split")
    labels = rng.integers(num_classes, size=size).astype(np.int64)
    images = rng.integers(0, 160, size=(size, *shape), dtype=np.uint8)
    rows = np.arange(shape[0])
    for label in range(num_classes):
        top = label * shape[0] // num_classes
        band = (rows >= top) & (rows < max(top + 1, (label + 1) * shape[0] // num_classes))
        chosen = np.flatnonzero(labels == label)
        images[np.ix_(chosen, np.flatnonzero(band))] += 95
    return images, labels + first_label


def _size(dataset: str, split: str) -> int:
    """The fake length of a split (LENGTHS); a split not listed: 3200 when it trains, else 800."""
    known = LENGTHS.get(dataset, {}).get(split)
    if known is not None:
        return known[1]
    return _FOLDER["train" if split.startswith("train") or split in ("unlabeled", "extra", "all") else "test"][1]


def _pil(array: Any) -> Any:
    from PIL import Image

    return Image.fromarray(array)  # 2-D uint8 -> "L", H x W x 3 uint8 -> "RGB"


def _vision_init(dataset: Any, root: Any, transform: Any = None, target_transform: Any = None, transforms: Any = None) -> None:
    from torchvision.datasets.vision import VisionDataset

    VisionDataset.__init__(dataset, root, transforms=transforms, transform=transform, target_transform=target_transform)


def _apply(dataset: Any, image: Any, target: Any) -> tuple[Any, Any]:
    if dataset.transform is not None:
        image = dataset.transform(image)
    if dataset.target_transform is not None:
        target = dataset.target_transform(target)
    return image, target


# ---------------------------------------------------------------------------------------------
# MNIST family: .data uint8 tensor N x 28 x 28, .targets int64 tensor N


class _MnistFake:
    data: Any
    targets: Any
    classes: list[str]
    split: str  # set by _EmnistFake only (the others have none)

    def __init__(self, root: Any, train: bool = True, transform: Any = None, target_transform: Any = None, download: bool = False, **kwargs: Any) -> None:
        _vision_init(self, root, transform, target_transform)
        self.train = train
        self._fake_fill("train" if train else "test")

    def _fake_fill(self, split: str, num_classes: int | None = None, first_label: int = 0) -> None:
        import torch

        name = type(self).__name__
        key = f"{name}/{getattr(self, 'split', '')}/{split}"
        dataset = f"{name}/{self.split}" if name == "EMNIST" else name
        images, labels = _stack(key, _size(dataset, split), (28, 28), num_classes or len(self.classes), first_label)
        self.data = torch.from_numpy(images)
        self.targets = torch.from_numpy(labels)

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        return _apply(self, _pil(self.data[index].numpy()), int(self.targets[index]))

    def __len__(self) -> int:
        return len(self.data)

    # The names of torchvision < 0.2.2, still read by old tutorials.
    @property
    def train_data(self) -> Any:
        return self.data

    @property
    def test_data(self) -> Any:
        return self.data

    @property
    def train_labels(self) -> Any:
        return self.targets

    @property
    def test_labels(self) -> Any:
        return self.targets


class _EmnistFake(_MnistFake):
    classes_split_dict: dict[str, list[str]]  # the real EMNIST's class attribute

    def __init__(self, root: Any, split: str, **kwargs: Any) -> None:
        self.split = split
        self.classes = self.classes_split_dict[split]
        transform, target_transform = kwargs.get("transform"), kwargs.get("target_transform")
        _vision_init(self, root, transform, target_transform)
        self.train = kwargs.get("train", True)
        if split == "letters":  # targets 1..26, class 0 is "N/A"
            self._fake_fill("train" if self.train else "test", 26, 1)
        else:
            self._fake_fill("train" if self.train else "test")


class _QmnistFake(_MnistFake):
    def __init__(self, root: Any, what: str | None = None, compat: bool = True, train: bool = True, **kwargs: Any) -> None:
        import torch

        self.what = what or ("train" if train else "test")
        self.compat = compat
        _vision_init(self, root, kwargs.get("transform"), kwargs.get("target_transform"))
        self.train = train
        self._fake_fill(self.what)
        extended = torch.zeros(len(self.targets), 8, dtype=torch.int64)  # class, nist hsf, writer, ...
        extended[:, 0] = self.targets
        self.targets = extended

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        target = self.targets[index]
        return _apply(self, _pil(self.data[index].numpy()), int(target[0]) if self.compat else target)


# ---------------------------------------------------------------------------------------------
# CIFAR: .data uint8 array N x 32 x 32 x 3, .targets list of int


class _CifarFake:
    _fake_classes: list[str]

    def __init__(self, root: Any, train: bool = True, transform: Any = None, target_transform: Any = None, download: bool = False, **kwargs: Any) -> None:
        _vision_init(self, root, transform, target_transform)
        self.train = train
        self.classes = list(self._fake_classes)
        self.class_to_idx = {name: i for i, name in enumerate(self.classes)}
        split = "train" if train else "test"
        self.data, labels = _stack(f"{type(self).__name__}/{split}", _size(type(self).__name__, split), (32, 32, 3),
                                   len(self.classes))
        self.targets = [int(label) for label in labels]

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        return _apply(self, _pil(self.data[index]), self.targets[index])

    def __len__(self) -> int:
        return len(self.data)


# ---------------------------------------------------------------------------------------------
# SVHN and STL10: .data uint8 array N x 3 x H x W, .labels int64 array


class _ChannelsFirstFake:
    _fake_side: int

    def _fake_fill(self, split: str, labelled: int) -> None:
        import numpy as np

        side = self._fake_side
        images, labels = _stack(f"{type(self).__name__}/{split}", _size(type(self).__name__, split), (side, side, 3), 10)
        self.data = np.ascontiguousarray(images.transpose(0, 3, 1, 2))
        labels[labelled:] = -1
        self.labels = labels

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        import numpy as np

        label = int(self.labels[index]) if self.labels is not None else None
        return _apply(self, _pil(np.transpose(self.data[index], (1, 2, 0))), label)

    def __len__(self) -> int:
        return len(self.data)


class _SvhnFake(_ChannelsFirstFake):
    _fake_side = 32

    def __init__(self, root: Any, split: str = "train", transform: Any = None, target_transform: Any = None, download: bool = False, **kwargs: Any) -> None:
        _vision_init(self, root, transform, target_transform)
        self.split = split
        self._fake_fill(split, _size("SVHN", split))


class _Stl10Fake(_ChannelsFirstFake):
    _fake_side = 96

    def __init__(self, root: Any, split: str = "train", folds: int | None = None, transform: Any = None, target_transform: Any = None, download: bool = False, **kwargs: Any) -> None:
        _vision_init(self, root, transform, target_transform)
        self.split = split
        self.folds = folds
        self.classes = list(STL10_CLASSES)
        labelled = {"unlabeled": 0}.get(split, _size("STL10", "train" if split.startswith("train") else split))
        self._fake_fill(split, labelled)


# ---------------------------------------------------------------------------------------------
# CelebA: RGB 178 x 218 images made on demand; attr / identity / bbox / landmarks targets


class _CelebaFake:
    transform: Any  # set by VisionDataset.__init__
    target_transform: Any

    def __init__(self, root: Any, split: str = "train", target_type: Any = "attr", transform: Any = None, target_transform: Any = None, download: bool = False, **kwargs: Any) -> None:
        import numpy as np
        import torch

        _vision_init(self, root, transform, target_transform)
        self.split = split
        self.target_type = list(target_type) if isinstance(target_type, list) else [target_type]
        size = _size("CelebA", split)
        self._fake_key = f"CelebA/{split}"
        rows = [_rng(self._fake_key, "targets", i) for i in range(size)]
        self.filename = [f"{i + 1:06d}.jpg" for i in range(size)]
        self.attr = torch.from_numpy(np.stack([r.integers(0, 2, 40) for r in rows]))
        self.identity = torch.from_numpy(np.stack([r.integers(1, 10178, 1) for r in rows]))
        self.bbox = torch.from_numpy(np.stack([r.integers(0, 200, 4) for r in rows]))
        self.landmarks_align = torch.from_numpy(np.stack([r.integers(60, 160, 10) for r in rows]))
        self.attr_names = list(CELEBA_ATTRIBUTES)

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        male = int(self.attr[index, CELEBA_ATTRIBUTES.index("Male")])
        image = _pil(_image(self._fake_key, index, (218, 178, 3), male, 2))
        target: Any = []
        for kind in self.target_type:
            if kind == "attr":
                target.append(self.attr[index, :])
            elif kind == "identity":
                target.append(self.identity[index, 0])
            elif kind == "bbox":
                target.append(self.bbox[index, :])
            elif kind == "landmarks":
                target.append(self.landmarks_align[index, :])
            else:
                raise ValueError(f'Target type "{kind}" is not recognized.')
        if self.transform is not None:
            image = self.transform(image)
        if not target:
            return image, None
        target = tuple(target) if len(target) > 1 else target[0]
        if self.target_transform is not None:
            target = self.target_transform(target)
        return image, target

    def __len__(self) -> int:
        return len(self.attr)


# ---------------------------------------------------------------------------------------------
# Folders: samples are (made-up path, class index); images made on demand from the path


class _FolderFake:
    _fake_num_classes = 4

    def _fake_fill(self, root: Any, loader: Any, extensions: Any, split: str | None = None) -> None:
        if split is None:
            name = os.path.basename(os.path.normpath(os.fspath(root))).lower() if root else ""
            split = "test" if name.startswith(("val", "test")) else "train"
        self.classes = [f"class_{i}" for i in range(self._fake_num_classes)]
        self.class_to_idx = {name: i for i, name in enumerate(self.classes)}
        key = f"{type(self).__name__}/{split}"
        labels = [_label(key, i, len(self.classes)) for i in range(_size(type(self).__name__, split))]
        folder = os.fspath(root) if root else ""
        self.samples = [(os.path.join(folder, self.classes[c], f"{i:05d}.png"), c) for i, c in enumerate(labels)]
        self.imgs = self.samples
        self.targets = labels
        if loader is None:
            from torchvision.datasets.folder import default_loader

            loader = default_loader
        self.loader = loader  # kept for scripts that read it; the fake never calls it
        self.extensions = extensions

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        path, target = self.samples[index]
        image = _pil(_image(type(self).__name__, path, (*FOLDER_IMAGE_SIZE, 3), target, len(self.classes)))
        return _apply(self, image, target)

    def __len__(self) -> int:
        return len(self.samples)


class _DatasetFolderFake(_FolderFake):
    def __init__(self, root: Any, loader: Any = None, extensions: Any = None, transform: Any = None, target_transform: Any = None, is_valid_file: Any = None, allow_empty: bool = False, **kwargs: Any) -> None:
        _vision_init(self, root, transform, target_transform)
        self._fake_fill(root, loader, extensions)


class _ImageFolderFake(_FolderFake):
    def __init__(self, root: Any, transform: Any = None, target_transform: Any = None, loader: Any = None, is_valid_file: Any = None, allow_empty: bool = False, **kwargs: Any) -> None:
        _vision_init(self, root, transform, target_transform)
        self._fake_fill(root, loader, (".jpg", ".jpeg", ".png"))


class _ImageNetFake(_FolderFake):
    _fake_num_classes = 10
    classes: list[Any]  # names, as the base fills them, then ImageNet's tuples of names

    def __init__(self, root: Any, split: str = "train", **kwargs: Any) -> None:
        _vision_init(self, root, kwargs.get("transform"), kwargs.get("target_transform"))
        self.split = split
        self._fake_fill(os.path.join(os.fspath(root), split), kwargs.get("loader"), (".jpeg",), split)
        self.wnids = [f"n{i:08d}" for i in range(len(self.classes))]
        self.wnid_to_idx = {wnid: i for i, wnid in enumerate(self.wnids)}
        self.classes = [(name,) for name in self.classes]  # ImageNet's classes are tuples of names
        self.class_to_idx = {name[0]: i for i, name in enumerate(self.classes)}


class _LsunFake(_FolderFake):
    _verify_classes: Callable[[Any], list[str]]  # the real LSUN's method

    def __init__(self, root: Any, classes: Any = "train", transform: Any = None, target_transform: Any = None, **kwargs: Any) -> None:
        _vision_init(self, root, transform, target_transform)
        self.classes = self._verify_classes(classes)
        split = "train" if all(c.endswith("_train") for c in self.classes) else "test"
        key = f"LSUN/{split}"
        labels = [_label(key, i, len(self.classes)) for i in range(_size("LSUN", split))]
        self.samples = [(f"{self.classes[c]}/{i:07d}", c) for i, c in enumerate(labels)]
        self.targets = labels
        self.length = len(labels)


# ---------------------------------------------------------------------------------------------
# VOCSegmentation: RGB image and a palette mask (classes 0-20, 255 on the border)


class _VocSegmentationFake:
    transforms: Any  # set by VisionDataset.__init__

    def __init__(self, root: Any, year: str = "2012", image_set: str = "train", download: bool = False, transform: Any = None, target_transform: Any = None, transforms: Any = None, **kwargs: Any) -> None:
        _vision_init(self, root, transform, target_transform, transforms)
        self.year = year
        self.image_set = image_set
        self._fake_key = f"VOCSegmentation/{year}/{image_set}"
        size = _size("VOCSegmentation", image_set)
        self.images = [f"{i:06d}.jpg" for i in range(size)]
        self.targets = [f"{i:06d}.png" for i in range(size)]  # the real `masks` reads these

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        from PIL import Image

        label = _label(self._fake_key, index, 20) + 1
        shape = (96, 128)
        image = _pil(_image(self._fake_key, index, (*shape, 3), label, 21))
        mask = (_image(self._fake_key, f"mask{index}", shape, 0, 1) > 200).astype("uint8") * label
        mask[0, :] = mask[-1, :] = mask[:, 0] = mask[:, -1] = 255
        target = Image.fromarray(mask).convert("P")
        if self.transforms is not None:
            image, target = self.transforms(image, target)
        return image, target

    def __len__(self) -> int:
        return len(self.images)


# ---------------------------------------------------------------------------------------------


def _fakes() -> dict[str, tuple[type, dict[str, Any]]]:
    """torchvision class name -> (mixin, extra class attributes)."""
    cifar100 = [f"class_{i:02d}" for i in range(100)]
    return {
        "MNIST": (_MnistFake, {}),
        "FashionMNIST": (_MnistFake, {}),
        "KMNIST": (_MnistFake, {}),
        "EMNIST": (_EmnistFake, {}),
        "QMNIST": (_QmnistFake, {}),
        "CIFAR10": (_CifarFake, {"_fake_classes": CIFAR10_CLASSES}),
        "CIFAR100": (_CifarFake, {"_fake_classes": cifar100}),
        "SVHN": (_SvhnFake, {}),
        "STL10": (_Stl10Fake, {}),
        "CelebA": (_CelebaFake, {}),
        "DatasetFolder": (_DatasetFolderFake, {}),
        "ImageFolder": (_ImageFolderFake, {}),
        "ImageNet": (_ImageNetFake, {}),
        "LSUN": (_LsunFake, {}),
        "VOCSegmentation": (_VocSegmentationFake, {}),
    }


def install_fake_datasets() -> list[str]:
    """Replace torchvision's downloaded datasets by synthetic ones; the names replaced.

    [] when torchvision does not import. Calling it again changes nothing and returns the same list.
    """
    global _installed
    if _installed is not None:
        return list(_installed)
    try:
        import torchvision.datasets as datasets
    except Exception:  # not installed, or a build that does not match torch
        return []
    patched = []
    for name, (mixin, attributes) in _fakes().items():
        real = getattr(datasets, name, None)
        if not isinstance(real, type):
            continue
        fake = type(name, (mixin, real), {**attributes, "__module__": __name__, "__qualname__": name})
        fake.__doc__ = f"Synthetic stand-in for torchvision.datasets.{name} (migrate verify --fake-data)."
        globals()[name] = fake
        for module in (datasets, sys.modules.get(real.__module__)):
            if module is not None and getattr(module, name, None) is real:
                setattr(module, name, fake)
        patched.append(name)
    _installed = patched
    return list(patched)


def __getattr__(name: str) -> Any:
    """A fake class by name, installing the fakes first (a spawned DataLoader worker unpickling one)."""
    if not name.startswith("_") and name[:1].isupper():
        install_fake_datasets()
        if name in globals():
            return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
