"""torchlint: find and fix autograd mistakes in PyTorch training code before it runs."""

__version__ = "0.1.0"
