"""Correct: imports standard-library modules nobody preloads (xml, doctest, unittest)."""

import doctest
import unittest
import xml.dom.minidom  # noqa: F401 - left over from another exercise

import torch


def scores(q, keys):
    """Scores of one query against each key.

    >>> scores(torch.tensor([1.0, 0.0]), torch.tensor([[1.0, 0.0], [0.0, 1.0]])).tolist()
    [1.0, 0.0]
    """
    return torch.stack([torch.dot(k, q) for k in keys]) if len(keys) else keys @ q


class TestScores(unittest.TestCase):
    def test_aligned(self):
        self.assertEqual(scores(torch.tensor([1.0]), torch.tensor([[2.0]])).item(), 2.0)


if __name__ == "__main__":
    doctest.testmod()
