"""migrate.verify.fake_data: torchvision's downloaded datasets replaced by small synthetic ones.

torchvision is imported only in child interpreters started with tests/shims on PYTHONPATH (the
CUDA-built wheel needs the shim next to the CPU torch); one probe process reports everything as
JSON, and a second one shows that the content is the same in every process.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHIMS = ROOT / "tests" / "shims"

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("torchvision") is None, reason="torchvision is not installed (scripts/bootstrap test)"
)

PROBE = r'''
import hashlib, json, os, sys
import torch
from migrate.verify.fake_data import install_fake_datasets

report = {"patched": install_fake_datasets(), "again": install_fake_datasets()}
import torchvision
import torchvision.datasets as datasets
from torchvision import transforms as T
from torchvision.datasets import MNIST, CIFAR10
from torchvision.datasets.mnist import MNIST as SubmoduleMNIST

def describe(item):
    if isinstance(item, torch.Tensor):
        return ["Tensor", str(item.dtype), list(item.shape)]
    if hasattr(item, "mode"):
        return ["PIL", item.mode, list(item.size)]
    if isinstance(item, tuple):
        return ["tuple"] + [describe(part) for part in item]
    return [type(item).__name__]

def digest(dataset):
    h = hashlib.sha256()
    for i in (0, 1, len(dataset) - 1):
        image, target = dataset[i]
        h.update(T.functional.pil_to_tensor(image).numpy().tobytes())
        if hasattr(target, "tobytes"):  # a PIL mask
            h.update(target.tobytes())
        else:
            h.update(repr(target.tolist() if isinstance(target, torch.Tensor) else target).encode())
    return h.hexdigest()

ROOT = "/nonexistent/fake-data-root"
CASES = {
    "MNIST": (datasets.MNIST, {"download": True}),
    "MNIST-test": (datasets.MNIST, {"train": False}),
    "FashionMNIST": (datasets.FashionMNIST, {}),
    "KMNIST": (datasets.KMNIST, {"train": False}),
    "EMNIST-letters": (datasets.EMNIST, {"split": "letters"}),
    "QMNIST": (datasets.QMNIST, {"what": "test", "compat": False}),
    "CIFAR10": (datasets.CIFAR10, {"download": True}),
    "CIFAR100-test": (datasets.CIFAR100, {"train": False}),
    "SVHN": (datasets.SVHN, {"split": "train"}),
    "STL10-unlabeled": (datasets.STL10, {"split": "unlabeled"}),
    "STL10-test": (datasets.STL10, {"split": "test"}),
    "CelebA": (datasets.CelebA, {"target_type": ["attr", "identity"]}),
    "ImageFolder": (datasets.ImageFolder, {}),
    "ImageFolder-val": (datasets.ImageFolder, {"root": "/data/imagenet/val"}),
    "DatasetFolder": (datasets.DatasetFolder, {"loader": None, "extensions": (".npy",)}),
    "ImageNet": (datasets.ImageNet, {"split": "val"}),
    "LSUN": (datasets.LSUN, {"classes": ["bedroom_train", "tower_train"]}),
    "VOCSegmentation": (datasets.VOCSegmentation, {"image_set": "val"}),
}
report["datasets"] = {}
for name, (cls, kwargs) in CASES.items():
    kwargs = {"root": ROOT, **kwargs}
    dataset = cls(**kwargs)
    entry = {"len": len(dataset), "image": describe(dataset[5][0]), "target": describe(dataset[5][1]), "digest": digest(dataset),
             "same_again": digest(cls(**kwargs)) == digest(dataset)}
    for attribute in ("data", "targets", "labels"):
        value = getattr(dataset, attribute, None)
        if value is not None:
            entry[attribute] = [type(value).__name__, str(getattr(value, "dtype", "")), list(getattr(value, "shape", [len(value)]))]
    for attribute in ("classes", "class_to_idx", "samples", "imgs"):
        if hasattr(dataset, attribute):
            entry[attribute] = len(getattr(dataset, attribute))
    report["datasets"][name] = entry

mnist = MNIST(ROOT, transform=T.Compose([T.ToTensor(), T.Normalize((0.5,), (0.5,))]), target_transform=lambda t: t + 100)
image, target = mnist[0]
report["mnist"] = {
    "same_class": [MNIST is datasets.MNIST, SubmoduleMNIST is datasets.MNIST, sys.modules["torchvision.datasets.mnist"].MNIST is MNIST],
    "subclass_of_real": isinstance(mnist, torchvision.datasets.VisionDataset) and MNIST.__mro__[2].__module__ == "torchvision.datasets.mnist",
    "item": describe(image), "target": target, "range": [float(image.min()), float(image.max())],
    "aliases": [mnist.train_data is mnist.data, mnist.test_data is mnist.data,
                mnist.train_labels is mnist.targets, mnist.test_labels is mnist.targets],
    "targets_in_range": bool(((mnist.targets >= 0) & (mnist.targets < 10)).all()),
    "classes_seen": len(set(mnist.targets.tolist())),
}
cifar = CIFAR10(ROOT, train=True, transform=T.Compose([T.RandomCrop(32, padding=4), T.ToTensor()]))
report["cifar_transform"] = describe(cifar[3][0])
report["cifar_targets"] = [type(cifar.targets[0]).__name__, all(0 <= t < 10 for t in cifar.targets)]
joint = datasets.VOCSegmentation(ROOT, transforms=lambda image, mask: (T.functional.to_tensor(image), torch.as_tensor(T.functional.pil_to_tensor(mask))))
report["voc_joint"] = [describe(part) for part in joint[0]]
loader = torch.utils.data.DataLoader(CIFAR10(ROOT, transform=T.ToTensor()), batch_size=16, shuffle=False)
images, labels = next(iter(loader))
report["batch"] = [list(images.shape), list(labels.shape), str(labels.dtype)]
letters = datasets.EMNIST(ROOT, "letters").targets
report["emnist_letters"] = [int(letters.min()), int(letters.max())]
report["cwd_files"] = os.listdir(".")
report["root_exists"] = os.path.exists(ROOT)
print(json.dumps(report))
'''


def run_probe(code: str, cwd: Path, with_shim: bool = True) -> subprocess.CompletedProcess[str]:
    paths = ([str(SHIMS)] if with_shim else []) + [str(ROOT)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    runs = []
    for attempt in range(2):  # two processes: the content must not depend on the process
        cwd = tmp_path_factory.mktemp(f"probe{attempt}")
        result = run_probe(PROBE, cwd)
        assert result.returncode == 0, result.stderr
        runs.append(json.loads(result.stdout.strip().splitlines()[-1]))
    return runs


@pytest.fixture(scope="module")
def report(reports: list[dict]) -> dict:
    return reports[0]


def test_every_listed_dataset_is_patched_once(report: dict) -> None:
    expected = {"MNIST", "FashionMNIST", "KMNIST", "EMNIST", "QMNIST", "CIFAR10", "CIFAR100", "SVHN", "STL10",
                "CelebA", "ImageFolder", "DatasetFolder", "ImageNet", "LSUN", "VOCSegmentation"}
    assert set(report["patched"]) == expected
    assert report["again"] == report["patched"]


@pytest.mark.parametrize(
    ("name", "length", "image"),
    [
        ("MNIST", 12000, ["PIL", "L", [28, 28]]),
        ("MNIST-test", 2000, ["PIL", "L", [28, 28]]),
        ("FashionMNIST", 12000, ["PIL", "L", [28, 28]]),
        ("KMNIST", 2000, ["PIL", "L", [28, 28]]),
        ("EMNIST-letters", 9600, ["PIL", "L", [28, 28]]),
        ("QMNIST", 12000, ["PIL", "L", [28, 28]]),
        ("CIFAR10", 2000, ["PIL", "RGB", [32, 32]]),
        ("CIFAR100-test", 2000, ["PIL", "RGB", [32, 32]]),
        ("SVHN", 1257, ["PIL", "RGB", [32, 32]]),
        ("STL10-unlabeled", 800, ["PIL", "RGB", [96, 96]]),
        ("STL10-test", 1600, ["PIL", "RGB", [96, 96]]),
        ("CelebA", 410, ["PIL", "RGB", [178, 218]]),
        ("ImageFolder", 3200, ["PIL", "RGB", [64, 64]]),
        ("ImageFolder-val", 800, ["PIL", "RGB", [64, 64]]),
        ("DatasetFolder", 3200, ["PIL", "RGB", [64, 64]]),
        ("ImageNet", 2000, ["PIL", "RGB", [64, 64]]),
        ("LSUN", 3200, ["PIL", "RGB", [64, 64]]),
        ("VOCSegmentation", 1449, ["PIL", "RGB", [128, 96]]),
    ],
)
def test_sizes_and_image_types(report: dict, name: str, length: int, image: list) -> None:
    entry = report["datasets"][name]
    assert entry["len"] == length
    assert entry["image"] == image  # PIL size is [width, height]


def test_data_layouts_match_torchvision(report: dict) -> None:
    data = report["datasets"]
    assert data["MNIST"]["data"] == ["Tensor", "torch.uint8", [12000, 28, 28]]
    assert data["MNIST"]["targets"] == ["Tensor", "torch.int64", [12000]]
    assert data["QMNIST"]["targets"] == ["Tensor", "torch.int64", [12000, 8]]
    assert data["CIFAR10"]["data"] == ["ndarray", "uint8", [2000, 32, 32, 3]]
    assert data["CIFAR10"]["targets"] == ["list", "", [2000]]
    assert data["CIFAR100-test"]["classes"] == 100
    assert data["SVHN"]["data"] == ["ndarray", "uint8", [1257, 3, 32, 32]]
    assert data["SVHN"]["labels"] == ["ndarray", "int64", [1257]]
    assert data["STL10-test"]["data"] == ["ndarray", "uint8", [1600, 3, 96, 96]]
    assert data["EMNIST-letters"]["classes"] == 27  # "N/A" and 26 letters, as in torchvision
    assert report["emnist_letters"] == [1, 26]
    folder = data["ImageFolder"]
    assert 2 <= folder["classes"] == folder["class_to_idx"] <= 4
    assert folder["samples"] == folder["imgs"] == 3200

    targets = {name: entry["target"] for name, entry in data.items()}
    for name in ("MNIST", "EMNIST-letters", "CIFAR10", "SVHN", "STL10-unlabeled", "ImageFolder", "ImageNet", "LSUN"):
        assert targets[name] == ["int"], name
    assert targets["QMNIST"] == ["Tensor", "torch.int64", [8]]  # compat=False
    assert targets["CelebA"] == ["tuple", ["Tensor", "torch.int64", [40]], ["Tensor", "torch.int64", []]]
    assert targets["VOCSegmentation"] == ["PIL", "P", [128, 96]]


def test_content_is_the_same_in_every_process_and_instance(reports: list[dict]) -> None:
    first, second = reports
    for name, entry in first["datasets"].items():
        assert entry["same_again"], name
        assert entry["digest"] == second["datasets"][name]["digest"], name
    assert first["datasets"]["MNIST"]["digest"] != first["datasets"]["FashionMNIST"]["digest"]
    assert first["datasets"]["MNIST"]["digest"] != first["datasets"]["MNIST-test"]["digest"]


def test_both_import_paths_see_the_fake_and_transforms_apply(report: dict) -> None:
    mnist = report["mnist"]
    assert mnist["same_class"] == [True, True, True]
    assert mnist["subclass_of_real"]
    assert mnist["item"] == ["Tensor", "torch.float32", [1, 28, 28]]
    assert 100 <= mnist["target"] < 110  # target_transform ran
    assert -1.0 <= mnist["range"][0] < mnist["range"][1] <= 1.0  # Normalize ran after ToTensor
    assert mnist["aliases"] == [True, True, True, True]
    assert mnist["targets_in_range"] and mnist["classes_seen"] == 10
    assert report["cifar_transform"] == ["Tensor", "torch.float32", [3, 32, 32]]
    assert report["cifar_targets"] == ["int", True]
    assert report["voc_joint"] == [["Tensor", "torch.float32", [3, 96, 128]], ["Tensor", "torch.uint8", [1, 96, 128]]]
    assert report["batch"] == [[16, 3, 32, 32], [16], "torch.int64"]


def test_nothing_touches_the_disk(report: dict) -> None:
    assert report["cwd_files"] == []
    assert report["root_exists"] is False


def test_without_torchvision_nothing_is_patched(tmp_path: Path) -> None:
    code = (
        "import sys\nsys.modules['torchvision'] = None  # import torchvision now raises ImportError\n"
        "from migrate.verify.fake_data import install_fake_datasets\nprint(install_fake_datasets())\n"
    )
    result = run_probe(code, tmp_path, with_shim=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
