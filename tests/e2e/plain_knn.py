"""A downstream user's process: an exported encoder and its sidecar, torch, torchvision and
scikit-learn, nothing of this suite (its packages cannot even be imported here).

python -I plain_knn.py WEIGHTS RECORD [WEIGHTS RECORD ...]

For each exported encoder (the sidecar is WEIGHTS.json): builds the model from the sidecar's
`build` line, loads the weights strictly, feeds digits' images through the sidecar's `transform`
and computes the weighted kNN with the settings of RECORD's kNN protocol (its k and
temperature). Prints one JSON line per encoder: the top-1 computed here and the one recorded.
"""
import sys

sys.modules.update(benchmark=None, methods=None)  # `import benchmark` now fails

import json  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torchvision  # noqa: E402
from PIL import Image  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402


def encoder(weights: str, sidecar: dict) -> torch.nn.Module:
    scope = {'torch': torch, 'torchvision': torchvision}
    exec(sidecar['build'], scope)  # m = torchvision.models.resnet18(); ...
    model = scope['m']
    model.load_state_dict(torch.load(weights, weights_only=True))  # strict=True
    return model.eval()


def digits() -> list:
    """digits' train and val splits as grey PIL images and labels: pixel counts 0-16 scaled to
    0-255, the stratified 80/20 split with random_state=0."""
    data = load_digits()
    images = np.round(data.images * (255 / 16)).astype(np.uint8)
    train, val = train_test_split(np.arange(len(data.target)), test_size=0.2, random_state=0,
                                  stratify=data.target)
    return [([Image.fromarray(images[i]) for i in keep], torch.as_tensor(data.target[keep]))
            for keep in (train, val)]


@torch.no_grad()
def features(model: torch.nn.Module, transform, images: list) -> torch.Tensor:
    batch = torch.stack([transform(image) for image in images])
    return torch.cat([model(batch[i:i + 256]) for i in range(0, len(batch), 256)])


def knn_top1(train, train_labels, test, test_labels, k: int, temperature: float) -> float:
    """Weighted kNN: the k training images most cosine-similar to a test image each vote for
    their label with weight exp(similarity / temperature)."""
    train = torch.nn.functional.normalize(train, dim=1)
    test = torch.nn.functional.normalize(test, dim=1)
    sims, nearest = (test @ train.T).topk(k, dim=1)
    scores = torch.zeros(len(test), int(train_labels.max()) + 1, dtype=torch.float64)
    scores.scatter_add_(1, train_labels[nearest], (sims.double() / temperature).exp())
    return 100.0 * (scores.argmax(dim=1) == test_labels).double().mean().item()


def main(args: list) -> None:
    (train_images, train_labels), (val_images, val_labels) = digits()
    for weights, record in zip(args[::2], args[1::2]):
        with open(f'{weights}.json') as handle:
            sidecar = json.load(handle)
        with open(record) as handle:
            knn = json.load(handle)['protocols']['knn']
        model = encoder(weights, sidecar)
        transform = eval(sidecar['transform'], {'torch': torch, 'torchvision': torchvision})
        top1 = knn_top1(features(model, transform, train_images), train_labels,
                        features(model, transform, val_images), val_labels,
                        knn['settings']['k'], knn['settings']['temperature'])
        print(json.dumps(dict(weights=weights, top1=top1, recorded=knn['metrics']['top1'])))


if __name__ == '__main__':
    main(sys.argv[1:])
