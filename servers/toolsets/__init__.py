"""Toolsets more than one domain serves: the Zendesk tools and tables (`zendesk`)
and the policy knowledge base (`knowledge`). A domain picks its variant of each."""
