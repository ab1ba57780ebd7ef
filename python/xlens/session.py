"""session"""

__all__ = []
