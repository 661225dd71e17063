"""Files shipped with gplace: the pretrained policy ``list_scheduling_giph.pt`` (see :mod:`gplace.methods`)."""
