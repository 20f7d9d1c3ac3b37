"""What stops an emulated NVIDIA channel, whichever engine found it (the PBDMA, the copy engine, the compute class)."""


class ChannelError(Exception):
  """What stops a channel: `xid` is the ROBUST_CHANNEL_* code the RM puts in the error notifier and logs."""

  def __init__(self, message: str, xid: int):
    super().__init__(message)
    self.xid = xid
