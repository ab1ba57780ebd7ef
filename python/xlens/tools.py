"""tools"""

__all__ = []
