"""A fake OpenAI-compatible streaming server for the harness tests: one token per chunk, and usage that can lie.

    with FakeServer(completion_lie=+5) as server:   # reports 5 more completion tokens than it streams
        server.url ...
"""
import http.server
import json
import threading


class FakeServer:
    def __init__(self, num_tokens=6, completion_lie=0, include_usage=True, max_prompt_chars=None):
        self.num_tokens = num_tokens          # tokens streamed per request (fewer when max_tokens is lower)
        self.completion_lie = completion_lie  # added to the true completion count in usage
        self.include_usage = include_usage
        self.max_prompt_chars = max_prompt_chars  # longer prompts get a 400, like a context-length refusal
        self.bodies = []

    def __enter__(self):
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = 'HTTP/1.1'

            def log_message(self, *args):
                pass

            def send_json(self, status, obj):
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header('Content-Type', 'application/json')
                self.send_header('Content-Length', str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path == '/v1/models':
                    self.send_json(200, {'object': 'list', 'data': [{'id': 'fake-model', 'owned_by': 'fake'}]})
                elif self.path == '/health':
                    self.send_json(200, {'status': 'ok'})
                else:
                    self.send_json(404, {'error': {'message': 'not found'}})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers['Content-Length'])))
                fake.bodies.append(body)
                chat = self.path == '/v1/chat/completions'
                prompt = json.dumps(body['messages']) if chat else body['prompt']
                if fake.max_prompt_chars is not None and len(prompt) > fake.max_prompt_chars:
                    self.send_json(400, {'error': {'message': 'This model\'s maximum context length is 64 tokens',
                                                   'type': 'invalid_request_error',
                                                   'code': 'context_length_exceeded'}})
                    return
                n = min(fake.num_tokens, body['max_tokens'])
                self.send_response(200)
                self.send_header('Content-Type', 'text/event-stream')
                self.send_header('Transfer-Encoding', 'chunked')
                self.end_headers()

                def event(obj):
                    data = f'data: {obj if isinstance(obj, str) else json.dumps(obj)}\n\n'.encode()
                    self.wfile.write(f'{len(data):x}\r\n'.encode() + data + b'\r\n')
                    self.wfile.flush()

                for i in range(n):
                    text = f'tok{i} '
                    if chat:
                        lp = {'content': [{'token': text, 'logprob': -0.1}]} if body.get('logprobs') else None
                        choice = {'index': 0, 'delta': {'content': text}, 'logprobs': lp, 'finish_reason': None}
                    else:
                        lp = {'tokens': [text], 'token_logprobs': [-0.1]} if body.get('logprobs') is not None else None
                        choice = {'index': 0, 'text': text, 'logprobs': lp, 'finish_reason': None}
                    event({'choices': [choice]})
                finish = 'length' if n == body['max_tokens'] else 'stop'
                event({'choices': [{'index': 0, 'delta': {}, 'finish_reason': finish} if chat else
                                   {'index': 0, 'text': '', 'finish_reason': finish}]})
                if fake.include_usage and (body.get('stream_options') or {}).get('include_usage'):
                    completion = n + fake.completion_lie
                    prompt_tokens = max(1, len(prompt) // 4)
                    event({'choices': [], 'usage': {'prompt_tokens': prompt_tokens, 'completion_tokens': completion,
                                                    'total_tokens': prompt_tokens + completion}})
                event('[DONE]')
                self.wfile.write(b'0\r\n\r\n')

        self.httpd = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()
        self.url = f'http://127.0.0.1:{self.httpd.server_address[1]}'
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
