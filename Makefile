# NodeDisks on a real (minikube) cluster, for people with Docker and minikube, with Kustomize (deploy)
# or the Helm chart (helm-install). Everything else (tests, the local demo without Docker) is `npm …`:
# see README.md; the last targets here are thin calls of those commands.
PROFILE ?= node-disks-dev
NODES ?= 4
OPERATOR_IMAGE ?= node-disks-operator:dev
AGENT_IMAGE ?= node-disks-agent:dev
CSI_IMAGE ?= node-disks-csi:dev
OVERLAY ?= kustomize/overlays/minikube
NAMESPACE ?= node-disks-system
# The helm this repository pins (hack/helm), built on first use; HELM=helm uses yours.
HELM ?= npm run --silent helm --
# The seed's chart seeded disk images on every node by default; this chart's defaults are
# kustomize/default's, which seeds none (docs/adr/0031-helm-chart.md). HELM_EXTRA= installs without them.
HELM_EXTRA ?= --set seeder.enabled=true

.PHONY: help minikube-up images images-load minikube-images-load deploy undeploy helm-install helm-uninstall minikube-delete test demo tools codegen

help: ## Show the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

minikube-up: ## Start a 4-node minikube cluster (profile node-disks-dev)
	minikube start -p $(PROFILE) --nodes $(NODES)

images: ## Build the controller, agent and CSI driver images
	docker build --target operator -t $(OPERATOR_IMAGE) .
	docker build --target agent -t $(AGENT_IMAGE) .
	docker build --target csi -t $(CSI_IMAGE) .

images-load: ## Build the images and load them: into the local cluster (npm run cluster) when it runs, else into minikube
	@npm run --silent cluster:images; rc=$$?; \
	if [ $$rc -eq 3 ]; then $(MAKE) --no-print-directory minikube-images-load; else exit $$rc; fi

minikube-images-load: images
	minikube -p $(PROFILE) image load $(OPERATOR_IMAGE)
	minikube -p $(PROFILE) image load $(AGENT_IMAGE)
	minikube -p $(PROFILE) image load $(CSI_IMAGE)

deploy: ## Install NodeDisks (CRD, RBAC, policies, controller, agents, CSI driver, seeder)
	kubectl apply --server-side -k $(OVERLAY)
	kubectl -n node-disks-system rollout status deployment/node-disks-operator --timeout=120s
	kubectl -n node-disks-system rollout status daemonset/node-disks-agent --timeout=120s
	kubectl -n node-disks-system rollout status deployment/node-disks-csi-controller --timeout=120s

undeploy: ## Remove NodeDisks (the CRD too); refuses while reservations exist (README: Uninstall)
	@held=$$(kubectl get nodedisks -o jsonpath='{range .items[?(@.metadata.finalizers)]}{.metadata.name}{" "}{end}' 2>/dev/null || true); \
	if [ -n "$$held" ]; then \
	  echo "error: these NodeDisks hold reservations on their nodes: $$held" >&2; \
	  echo "release them (kubectl nodedisks release NAME --force) or keep them on the nodes by removing their finalizers, as README.md says under Install on a real cluster (uninstalling); then run make undeploy again" >&2; \
	  exit 1; \
	fi
	kubectl delete --ignore-not-found -k $(OVERLAY)

helm-install: ## Install or upgrade NodeDisks with the Helm chart (the seed's command line)
	$(HELM) upgrade --install node-disks-manager charts/node-disks-manager -n $(NAMESPACE) --create-namespace \
		--set controller.image.repository=$(word 1,$(subst :, ,$(OPERATOR_IMAGE))) \
		--set controller.image.tag=$(word 2,$(subst :, ,$(OPERATOR_IMAGE))) \
		--set agent.image.repository=$(word 1,$(subst :, ,$(AGENT_IMAGE))) \
		--set agent.image.tag=$(word 2,$(subst :, ,$(AGENT_IMAGE))) \
		--set csi.image.repository=$(word 1,$(subst :, ,$(CSI_IMAGE))) \
		--set csi.image.tag=$(word 2,$(subst :, ,$(CSI_IMAGE))) $(HELM_EXTRA)

helm-uninstall: ## Remove the Helm release; keeps the NodeDisk CRD and every NodeDisk (crds.keep)
	$(HELM) uninstall node-disks-manager -n $(NAMESPACE) --ignore-not-found

minikube-delete: ## Delete the minikube cluster
	minikube delete -p $(PROFILE)

test: ## Run the test suite (no Docker needed)
	npm test

demo: ## The local demo cluster without Docker
	npm start

tools: ## Build the Go tools now instead of on first use (npm run setup)
	npm run setup

codegen: ## Regenerate the CRD and the chart's copies of kustomize/ (npm run generate)
	npm run generate
