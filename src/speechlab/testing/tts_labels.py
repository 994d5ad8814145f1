"""A short phone-aligned HTS label sequence ("hello", with pauses) for TTS tests: six phones
over 0.6 s, in the full-context format festival writes (times in 100 ns units)."""

from __future__ import annotations

HELLO_LABELS = ["0 1000000 x^x-pau+hh=ax@x_x/A:0_0_0",
                "1000000 1800000 x^pau-hh+ax=l@1_2/A:0_0_0",
                "1800000 3000000 pau^hh-ax+l=ow@2_1/A:0_0_0",
                "3000000 3500000 hh^ax-l+ow=pau@1_2/A:0_0_0",
                "3500000 5000000 ax^l-ow+pau=x@2_1/A:0_0_0",
                "5000000 6000000 l^ow-pau+x=x@x_x/A:0_0_0"]
