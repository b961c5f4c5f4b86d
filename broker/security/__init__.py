"""Who may talk to the broker, and how: listeners, TLS, SASL.

``listeners``  Kafka's listener settings: names, security protocols, advertised
               endpoints, the inter-broker listener, listener-prefixed overrides
``tls``        ``ssl.SSLContext`` objects from Kafka's PEM settings (server and client);
               the principal of a client certificate
"""
