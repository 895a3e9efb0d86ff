"""Fault injection: kills, pre-emptions, NaNs, dead ranks and corrupt files, each checked to end
in a resumable state or one clear line."""
