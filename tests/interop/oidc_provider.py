"""A real OpenID provider on loopback for the sign-in tests:
oidc-provider-mock (from PyPI), with two users in different groups, routes
of the tests' own (its signing key, a key rotation), and a check of PKCE
(RFC 7636) that the package itself does not make: a code is exchanged only
with the verifier whose challenge an authorization request carried."""

import base64
import hashlib
import threading
import urllib.parse

import flask
import oidc_provider_mock
import werkzeug.serving


class Provider:
    def __init__(self):
        app = oidc_provider_mock.app(
            user_claims=[
                oidc_provider_mock.User(sub="ana", claims={"groups": ["lab"]}),
                oidc_provider_mock.User(sub="bob", claims={"groups": ["guests"]}),
            ]
        )
        # What authorization requests asked, and what token requests proved.
        self.challenges = []
        self.exchanges = []

        @app.get("/test/key")
        def key():
            return flask.jsonify(flask.g.oidc_provider_mock_storage.jwk.as_dict(is_private=True))

        @app.post("/test/rotate")
        def rotate():
            from authlib import jose

            flask.g.oidc_provider_mock_storage.jwk = jose.RSAKey.generate_key(is_private=True)
            return "", 204

        # PKCE: the challenge each authorization request carried, by its
        # state, then by the code it was answered with.
        by_state, by_code = {}, {}

        @app.before_request
        def pkce():
            request = flask.request
            if request.path == "/oauth2/authorize" and "code_challenge" in request.values:
                challenge = (request.values["code_challenge"], request.values.get("code_challenge_method"))
                self.challenges.append(challenge)
                by_state[request.values.get("state")] = challenge
            # Clients without PKCE (test_oidc.py's scripted sign-in) pass;
            # test_signin.py asserts that zarrd's exchanges all carry it.
            if request.path == "/oauth2/token" and "code_verifier" in request.form:
                verifier = request.form["code_verifier"]
                proof = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
                self.exchanges.append((verifier, dict(request.form), request.headers.get("Authorization")))
                if by_code.get(request.form.get("code")) != (proof, "S256"):
                    return flask.jsonify(error="invalid_grant", error_description="PKCE verifier does not match"), 400
            return None

        @app.after_request
        def code_of_state(response):
            if flask.request.path == "/oauth2/authorize" and response.status_code == 302:
                query = urllib.parse.parse_qs(urllib.parse.urlparse(response.headers["Location"]).query)
                state, code = query.get("state", [None])[0], query.get("code", [None])[0]
                if state in by_state and code:
                    by_code[code] = by_state[state]
            return response

        self.server = werkzeug.serving.make_server("127.0.0.1", 0, app, threaded=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def stop(self):
        self.server.shutdown()
        self.thread.join()
