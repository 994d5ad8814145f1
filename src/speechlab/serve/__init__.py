"""``speechlab serve``: a local web app over :func:`speechlab.load`.

- :mod:`.models`: which models a server holds, under which names, and what each can do;
- :mod:`.runtime`: limits, worker threads, slots shared by every request;
- :mod:`.uploads`: request bodies within a size limit, and the audio in them;
- :mod:`.streams`: live recognition over a WebSocket;
- :mod:`.panels`: what the analysis panels show (F0 and spectrogram, attention maps, lattice
  hypotheses with BHP);
- :mod:`.app`: the Starlette app and its HTTP interface;
- :mod:`.commands`: the ``speechlab serve`` command;
- ``static/``: the page (HTML, CSS and JavaScript modules; no build step).
"""
