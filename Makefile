# NodeDisks on a real (minikube) cluster, for people with Docker and minikube. Everything else
# (tests, the local demo without Docker) is `npm …`: see README.md.
PROFILE ?= node-disks-dev
NODES ?= 4
OPERATOR_IMAGE ?= node-disks-operator:dev
AGENT_IMAGE ?= node-disks-agent:dev
OVERLAY ?= kustomize/overlays/minikube

.PHONY: help minikube-up images images-load deploy undeploy minikube-delete test demo

help: ## Show the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

minikube-up: ## Start a 4-node minikube cluster (profile node-disks-dev)
	minikube start -p $(PROFILE) --nodes $(NODES)

images: ## Build the controller and agent images
	docker build --target operator -t $(OPERATOR_IMAGE) .
	docker build --target agent -t $(AGENT_IMAGE) .

images-load: images ## Build the images and load them into minikube
	minikube -p $(PROFILE) image load $(OPERATOR_IMAGE)
	minikube -p $(PROFILE) image load $(AGENT_IMAGE)

deploy: ## Install NodeDisks (CRD, RBAC, policies, controller, agents, seeder)
	kubectl apply --server-side -k $(OVERLAY)
	kubectl -n node-disks-system rollout status deployment/node-disks-operator --timeout=120s
	kubectl -n node-disks-system rollout status daemonset/node-disks-agent --timeout=120s

undeploy: ## Remove NodeDisks (the CRD too); refuses while reservations exist (README: Uninstall)
	@held=$$(kubectl get nodedisks -o jsonpath='{range .items[?(@.metadata.finalizers)]}{.metadata.name}{" "}{end}' 2>/dev/null || true); \
	if [ -n "$$held" ]; then \
	  echo "error: these NodeDisks hold reservations on their nodes: $$held" >&2; \
	  echo "release them (kubectl nodedisks release NAME --force) or keep them on the nodes by removing their finalizers, as README.md says under Install on a real cluster (uninstalling); then run make undeploy again" >&2; \
	  exit 1; \
	fi
	kubectl delete --ignore-not-found -k $(OVERLAY)

minikube-delete: ## Delete the minikube cluster
	minikube delete -p $(PROFILE)

test: ## Run the test suite (no Docker needed)
	npm test

demo: ## The local demo cluster without Docker
	npm start
