"""fake_ctl.py - a fake ringfeedd control socket for the Python unit tests
of the tools (test_ringfeedctl.py, test_completion.py): canned replies to
request lines, the lines kept for the test to check."""
import socket
import threading


class Fake:
    """Answers each request line with REPLIES[line] (or `override`).  A
    list of replies is answered in turn, its last one from then on.  With
    multi, a connection is answered line after line until the tool closes
    it (ringfeedctl top asks STATUS, then STATS); else after one reply the
    fake closes it."""

    def __init__(self, path, replies, multi=False):
        self.path, self.replies, self.lines, self.multi = path, replies, [], multi
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(8)
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                buf = b""
                while True:
                    while b"\n" not in buf:
                        data = conn.recv(4096)
                        if not data:
                            break
                        buf += data
                    if b"\n" not in buf:
                        break
                    raw, buf = buf.split(b"\n", 1)
                    line = raw.decode()
                    self.lines.append(line)
                    reply = self.replies.get(line, "ERR bad-verb unknown verb\n")
                    if isinstance(reply, list):
                        reply = reply.pop(0) if len(reply) > 1 else reply[0]
                    conn.sendall(reply.encode())
                    if not self.multi:
                        break

    def close(self):
        # shutdown wakes the thread blocked in accept; close alone does not
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
